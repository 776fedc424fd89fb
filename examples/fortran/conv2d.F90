! conv2d forward, weight gradient and bias gradient in Fortran, column-major,
! callable from C (bind(c)). Every array is a Fortran array in its natural
! order: x(N, C, H, W), weight(O, C/groups, kH, kW), grad_output(N, O, Ho, Wo),
! y(N, O, Ho, Wo), grad_weight(O, C/groups, kH, kW), grad_bias(O): numoracle's
! layouts "NCHW:F" and "OIHW:F".
!
! Build:  gfortran -O2 -shared -fPIC conv2d.F90 -o libconv2d.so
!
! The other side of the trap (-DPLANTED_BUG_READ): the forward pass reads the
! weights as cuDNN's row-major (Out, In, kH, kW), i.e. as wr(kW, kH, In, Out),
! while the program holds them as w(Out, In, kH, kW).
!
! Planted bug (-DPLANTED_BUG), the weight-layout trap of a CUDA Fortran CNN:
! grad_weight is written in cuDNN's row-major (Out, In, kH, kW) order, which is
! the Fortran array gw(kW, kH, In, Out): "the gradients come back in (Out, In,
! H, W), not transformed like the weights". The program reads them as its own
! w(Out, In, kH, kW) and every update lands on the wrong weight.
#ifdef PLANTED_BUG_READ
#define WARG wr
#else
#define WARG w
#endif
module conv2d_example
  use iso_c_binding
  implicit none
contains
  subroutine conv2d_f32(x, WARG, b_p, go, y, gw, gb_p, n, c, o, h, wd, kh, kw, &
                        sh, sw, ph, pw, dh, dw, g, has_bias) bind(c, name="conv2d_f32")
    integer(c_int32_t), value :: n, c, o, h, wd, kh, kw, sh, sw, ph, pw, dh, dw, g, has_bias
    type(c_ptr), value :: b_p, gb_p
#ifdef PLANTED_BUG_READ
    real(c_float), intent(in) :: x(n, c, h, wd)
#else
    real(c_float), intent(in) :: x(n, c, h, wd), w(o, c / g, kh, kw)
#endif
    real(c_float), intent(in) :: go(n, o, (h + 2*ph - dh*(kh - 1) - 1) / sh + 1, &
                                          (wd + 2*pw - dw*(kw - 1) - 1) / sw + 1)
    real(c_float), intent(out) :: y(n, o, (h + 2*ph - dh*(kh - 1) - 1) / sh + 1, &
                                          (wd + 2*pw - dw*(kw - 1) - 1) / sw + 1)
#ifdef PLANTED_BUG_READ
    real(c_float), intent(in) :: wr(kw, kh, c / g, o)
#define W(oc, ic, ky, kx) wr(kx, ky, ic, oc)
#else
#define W(oc, ic, ky, kx) w(oc, ic, ky, kx)
#endif
#ifdef PLANTED_BUG
    real(c_float), intent(out) :: gw(kw, kh, c / g, o)
#define GW(oc, ic, ky, kx) gw(kx, ky, ic, oc)
#else
    real(c_float), intent(out) :: gw(o, c / g, kh, kw)
#define GW(oc, ic, ky, kx) gw(oc, ic, ky, kx)
#endif
    real(c_float), pointer :: b(:), gb(:)
    integer :: ho, wo, cg, og, s, oc, ic, ky, kx, iy, ix, yy, xx, grp
    real(c_float) :: acc

    ho = (h + 2*ph - dh*(kh - 1) - 1) / sh + 1
    wo = (wd + 2*pw - dw*(kw - 1) - 1) / sw + 1
    cg = c / g
    og = o / g
    if (has_bias /= 0) then
      call c_f_pointer(b_p, b, [o])
      call c_f_pointer(gb_p, gb, [o])
    end if
    ! forward
    do ix = 1, wo
      do iy = 1, ho
        do oc = 1, o
          grp = (oc - 1) / og
          do s = 1, n
            acc = 0.0
            do kx = 1, kw
              xx = (ix - 1)*sw - pw + (kx - 1)*dw + 1
              if (xx < 1 .or. xx > wd) cycle
              do ky = 1, kh
                yy = (iy - 1)*sh - ph + (ky - 1)*dh + 1
                if (yy < 1 .or. yy > h) cycle
                do ic = 1, cg
                  acc = acc + x(s, grp*cg + ic, yy, xx) * W(oc, ic, ky, kx)
                end do
              end do
            end do
            if (has_bias /= 0) acc = acc + b(oc)
            y(s, oc, iy, ix) = acc
          end do
        end do
      end do
    end do
    ! weight gradient
    do kx = 1, kw
      do ky = 1, kh
        do ic = 1, cg
          do oc = 1, o
            grp = (oc - 1) / og
            acc = 0.0
            do ix = 1, wo
              xx = (ix - 1)*sw - pw + (kx - 1)*dw + 1
              if (xx < 1 .or. xx > wd) cycle
              do iy = 1, ho
                yy = (iy - 1)*sh - ph + (ky - 1)*dh + 1
                if (yy < 1 .or. yy > h) cycle
                do s = 1, n
                  acc = acc + go(s, oc, iy, ix) * x(s, grp*cg + ic, yy, xx)
                end do
              end do
            end do
            GW(oc, ic, ky, kx) = acc
          end do
        end do
      end do
    end do
    ! bias gradient
    if (has_bias /= 0) then
      do oc = 1, o
        gb(oc) = sum(go(:, oc, :, :))
      end do
    end if
  end subroutine conv2d_f32
end module conv2d_example
